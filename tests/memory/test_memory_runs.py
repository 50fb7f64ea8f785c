"""``--memory`` as a run option: the same run as the older ``--codec 'NAME(SPEC)'``, refused when
named both ways, listed by ``adass train --help``, and its state kept by checkpoints."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
import torch
from memory_cases import chunk

from adass.codecs import ChunkKey
from adass.config import RunConfig
from adass.exchange import InProcHub, make_exchange
from adass.memory import MEMORIES, build_pair, encode_own
from adass.registry import SpecError
from adass.runtime import train

SMALL = {"data": "synthetic:n=150,d=6,classes=3,test=30", "model": "mlp:hidden=8", "epochs": 2,
         "batch_size": 24}  # fmt: skip


def _flat(items) -> list[torch.Tensor]:
    """The tensors of a nested list, in order."""
    if isinstance(items, torch.Tensor):
        return [items]
    return [t for item in items for t in _flat(item)]


def _parameters(**options) -> list[torch.Tensor]:
    """Every replica's final parameters of a small run of three replicas on threads."""
    result = train(RunConfig.from_flat(**SMALL, **options, workers=3), replicas=3)
    return _flat(result.extra["parameters"])


@pytest.mark.parametrize("memory, codec, exchange", [
    ("ef", "topk:ratio=0.25", "ring"),
    ("mc", "randk:ratio=0.25,scale=false+qsgd:bits=4", "ring:strategy=shared_scale"),
    ("dmc", "randk:ratio=0.25,scale=false", "ps"),
])  # fmt: skip
def test_memory_option_is_the_older_codec_spelling_bit_for_bit(
    memory: str, codec: str, exchange: str
) -> None:
    given = _parameters(memory=memory, codec=codec, exchange=exchange)
    older = _parameters(codec=f"{memory}({codec})", exchange=exchange)
    without = _parameters(codec=codec, exchange=exchange)
    assert all(torch.equal(a, b) for a, b in zip(given, older, strict=True))
    assert not all(torch.equal(a, b) for a, b in zip(given, without, strict=True))  # the memory acts


@pytest.mark.parametrize("codec", ["ef(topk:ratio=0.25)", "topk:ratio=0.25,mc=true", "dmc(fp16)"])
def test_naming_the_memory_both_ways_is_refused_in_one_line(codec: str) -> None:
    with pytest.raises(SpecError) as info:
        RunConfig.from_flat(codec=codec, memory="ef", replicas=2)
    message = str(info.value)
    assert "\n" not in message and message.startswith("--memory/--codec:") and "name it once" in message


def test_an_unknown_memory_or_one_the_codec_cannot_carry_is_refused() -> None:
    with pytest.raises(
        SpecError, match=r"--memory: .*'zz' is not allowed; expected one of dmc\|ef\|mc\|none"
    ):
        RunConfig.from_flat(memory="zz", replicas=2)
    with pytest.raises(SpecError, match="--memory/--codec: .*not contractive"):
        RunConfig.from_flat(memory="ef", codec="randk:ratio=0.1", replicas=2)
    with pytest.raises(SpecError, match="--exchange/--codec: .*memory 'mc' applies it on the workers"):
        RunConfig.from_flat(memory="mc", exchange="ps:update=server", replicas=2)
    with pytest.raises(SpecError, match="--memory: 'ef' needs --workers or --replicas"):
        RunConfig.from_flat(memory="ef")


def test_train_help_lists_the_memory_option_and_every_memory() -> None:
    out = subprocess.run([sys.executable, "-m", "adass.cli", "train", "--help"], capture_output=True,
                         text=True, timeout=120).stdout  # fmt: skip
    assert "--memory" in out and "dmc|ef|mc|none" in out
    for entry in MEMORIES:
        assert f"  {entry.name}  - {entry.doc}" in out


@pytest.mark.parametrize("name", [n for n in MEMORIES.names() if n != "none"])
def test_a_memorys_state_round_trips_through_state_dict(name: str) -> None:
    codec, memory = build_pair("randk:ratio=0.2,scale=false", name)
    memory.take_momentum(0.9)
    for step in range(3):
        for c in range(2):
            encode_own(codec, memory, chunk(50, seed=10 * step + c), ChunkKey(0, step, c))
        memory.settle(0.8)
    buffer = io.BytesIO()
    torch.save(memory.state_dict(), buffer)
    buffer.seek(0)
    _, restored = build_pair("randk:ratio=0.2,scale=false", name)
    restored.take_momentum(0.9)
    restored.load_state_dict(torch.load(buffer, weights_only=True))
    again = restored.state_dict()
    for part, tensors in memory.state_dict().items():
        assert again[part].keys() == tensors.keys() and len(tensors) == 2
        assert all(torch.equal(again[part][c], t) for c, t in tensors.items())
    key, x = ChunkKey(0, 3, 1), chunk(50, seed=99)
    assert torch.equal(restored.compensate(x, key), memory.compensate(x, key))


def test_an_exchange_checkpoint_keeps_the_memory_under_the_keys_of_before() -> None:
    """Checkpoints from when the memory came inside the codec hold ``{"memory": {"residuals": ...,
    "velocities": ...}}``; an exchange built from either spelling reads them."""
    hub = InProcHub(1)
    older = make_exchange("ring", hub.transport(0), "mc(topk:ratio=0.5)")
    older.take_momentum(0.9)
    older.reduce(chunk(40, seed=1))
    state = older.state_dict()
    assert set(state) == {"memory"} and set(state["memory"]) == {"residuals", "velocities"}
    newer = make_exchange("ring", InProcHub(1).transport(0), "topk:ratio=0.5", memory="mc")
    newer.load_state_dict(state)
    assert all(torch.equal(newer.memory.residuals[c], r) for c, r in state["memory"]["residuals"].items())
    assert all(torch.equal(newer.memory.velocities[c], u) for c, u in state["memory"]["velocities"].items())
