"""The simulated cluster itself: its nodes' resources, a killed node seen dead, and a replacement node."""

from __future__ import annotations


def test_nodes_resources_and_node_loss(cluster_driver):
    import ray

    cl = cluster_driver
    by_id = {n["NodeID"]: n for n in ray.nodes() if n["Alive"]}
    assert set(by_id) == cl.alive_node_ids()
    assert "sandbox" not in by_id[cl.node_id(cl.head)]["Resources"], "the head must not host sandboxes"
    for node in cl.sandbox_nodes:
        assert by_id[cl.node_id(node)]["Resources"]["sandbox"] == 4
    assert ray.cluster_resources()["sandbox"] == 8
    assert {n["NodeManagerAddress"] for n in by_id.values()} == {"127.0.0.1"}
    assert cl.address.startswith("127.0.0.1:")

    victim = cl.sandbox_nodes[0]
    cl.kill_node(victim)
    took = cl.wait_dead(victim)
    print(f"\nnode loss detected by the GCS in {took:.1f} s")
    assert cl.node_id(victim) not in cl.alive_node_ids()
    assert len(cl.sandbox_nodes) == 1
    cl.restore()
    assert len(cl.sandbox_nodes) == 2
    # the head and two sandbox nodes, plus the fake-GPU node once a test asked for it (session-scoped)
    assert len(cl.alive_node_ids()) == 3 + (cl.gpu_node is not None)
