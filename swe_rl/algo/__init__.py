"""Advantage estimators, AEM / EMPG modulation, the EPO regularizer, policy losses and chunked entropy.

Trainers use two functions from `swe_rl.algo.pipeline` (`compute_advantages`, `compute_policy_loss`) with an
`swe_rl.algo.config.AlgoConfig`; see README.md. Importing this package imports nothing heavy.
"""
