"""`swe-rl gateway`: serve a policy behind the recording OpenAI-compatible endpoint until Ctrl-C.

The tokenizer always comes from --model (a HF folder); the tokens come from one of three backends: `hf` (that
folder's weights in this process), `openai` (a served completions endpoint, e.g. `vllm serve`, at --upstream),
`vllm` (an in-process vLLM engine on that folder; needs the vLLM environment). On exit every session is written
to --out as JSON lines (the assembled trajectory or the per-call rows, the reason and the drift check).
"""

from __future__ import annotations

import contextlib
import json
import signal
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any

import typer


def build_policy(
    backend: str, model_dir: Path, upstream: str, served_name: str, max_context: int = 4096
) -> Any:
    if backend == "hf":
        import torch
        from transformers import AutoModelForCausalLM

        from swe_rl.policy.hf import HFLocalPolicy
        from swe_rl.policy.tiny import load_tokenizer

        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
        return HFLocalPolicy(model, load_tokenizer(model_dir))
    if backend == "openai":
        if not upstream:
            raise typer.BadParameter("--backend openai needs --upstream URL (…/v1)", param_hint="--upstream")
        from swe_rl.policy.openai import OpenAIPolicy, check_server

        try:  # the upstream is there and serves --name: one error now, not a failed call per agent request
            check_server(upstream, served_name, fields=("--upstream", "--name"))
        except ValueError as e:
            raise typer.BadParameter(str(e), param_hint="--upstream") from None
        return OpenAIPolicy(upstream, served_name)
    if backend == "vllm":
        from swe_rl.policy.vllm import VLLMPolicy

        return VLLMPolicy.start(str(model_dir), **vllm_overrides(max_context))
    raise typer.BadParameter(f"expected hf, openai or vllm, got {backend!r}", param_hint="--backend")


def vllm_overrides(max_context: int) -> dict[str, Any]:
    """The in-process engine serves the gateway's context (its own default is 2048 positions)."""
    return {"max_model_len": int(max_context)}


def template_kwargs_option(raw: str) -> dict[str, Any]:
    try:
        kw = json.loads(raw or "{}")
    except ValueError as e:
        raise typer.BadParameter(
            f"expected a JSON object, got {raw!r} ({e})", param_hint="--chat-template-kwargs"
        ) from None
    if not isinstance(kw, dict):
        raise typer.BadParameter(f"expected a JSON object, got {raw!r}", param_hint="--chat-template-kwargs")
    return kw


def write_sessions(gateway: Any, out: Path) -> int:
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w") as f:
        for sid, sess in list(gateway.sessions.items()):
            a = sess.assemble(sid)
            rec = {"session": sid, "assembled": a.trajectory is not None, "reason": a.reason, "drift": a.drift,
                   "trajectory": asdict(a.trajectory) if a.trajectory else None,
                   "rows": [] if a.trajectory else [asdict(r) for r in a.rows]}  # fmt: skip
            f.write(json.dumps(rec) + "\n")
    return len(gateway.sessions)


def gateway_command(
    model: Path = typer.Option(..., "--model", help="HF model folder (its tokenizer and chat template)"),
    backend: str = typer.Option(
        "hf", "--backend", help="hf (local weights), openai (served), vllm (in-process)"
    ),
    upstream: str = typer.Option("", "--upstream", help="openai backend: the completions server's …/v1 URL"),
    served_name: str = typer.Option("swe-rl", "--name", help="model name reported and sent upstream"),
    host: str = typer.Option("127.0.0.1", "--host", help="bind address (loopback by default)"),
    port: int = typer.Option(8000, "--port", help="port (0 = any free one)"),
    max_context: int = typer.Option(
        4096,
        "--max-context",
        help="prompt + completion tokens per call (also the vllm backend's max_model_len)",
    ),
    max_tokens: int = typer.Option(512, "--max-tokens", help="completion tokens when a request sets none"),
    template_kwargs: str = typer.Option(
        "{}",
        "--chat-template-kwargs",
        help="JSON defaults for the chat template, e.g. '{\"enable_thinking\": false}' (a request's own "
        "chat_template_kwargs win)",
    ),
    out: Path = typer.Option(Path("gateway_sessions.jsonl"), "--out", help="sessions written here on exit"),
) -> None:
    """OpenAI-compatible endpoint that records each agent session's tokens (base URL …/s/<session>/v1)."""
    from swe_rl.gateway.server import Gateway
    from swe_rl.policy.model_dir import ModelPathError, check_model_dir
    from swe_rl.policy.tiny import load_tokenizer

    try:  # the openai backend needs only the tokenizer here (the weights are served upstream)
        check_model_dir(model, "--model", weights=backend != "openai", local_only=True)
    except ModelPathError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    kw = template_kwargs_option(template_kwargs)
    policy = build_policy(backend, model, upstream, served_name, max_context)
    gw = Gateway(policy, load_tokenizer(model), model_name=served_name, host=host, port=port,
                 max_context_tokens=max_context, default_max_tokens=max_tokens, template_kwargs=kw)  # fmt: skip
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with gw:
        typer.echo(f"gateway: serving {served_name} at {gw.base_url} (per session: {gw.session_url('<id>')})")
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends serving; the sessions are still written
            stop.wait()
        n = write_sessions(gw, out)
    typer.echo(f"gateway: {n} sessions written to {out}")
