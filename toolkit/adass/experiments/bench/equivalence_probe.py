"""Train a list of cases with whichever ``adass`` is on the path; write each one's final parameters'
digest and wire bytes. ``adass bench equivalence`` runs it once with this tree and once with an
earlier revision's, so it uses only calls both have: run it as a script, never import it.

    python equivalence_probe.py CASES.json RESULTS.json
"""

from __future__ import annotations

import hashlib
import json
import sys


def digest(tensors) -> str:
    """SHA-256 of the tensors' bytes, in order (nested lists flattened)."""
    h = hashlib.sha256()
    stack = list(tensors)
    while stack:
        item = stack.pop(0)
        if isinstance(item, (list, tuple)):
            stack[:0] = list(item)
            continue
        array = item.detach().cpu().contiguous().numpy() if hasattr(item, "detach") else item
        h.update(str(array.dtype).encode() + str(array.shape).encode())
        h.update(array.tobytes())
    return h.hexdigest()


def one(case: dict, handle) -> dict:
    from adass.config import RunConfig

    try:
        from adass.runtime import run, train
    except ImportError:  # the layout before the runtime package
        from adass.run import run
        from adass.trainer import train

    flat, world = dict(case["flat"]), int(case["world"])
    if case["backend"] == "local":
        result = train(RunConfig.from_flat(**flat))
        parameters = list(result.model.parameters())
    elif case["backend"] == "threads":
        result = train(RunConfig.from_flat(**flat, workers=world), replicas=world)
        parameters = result.extra["parameters"]
    else:
        result = run(RunConfig.from_flat(**flat, workers=world), handle=handle)
        parameters = result.extra["parameters"]
    return {"id": case["id"], "digest": digest(parameters), "wire_bytes": int(result.final.wire_bytes),
            "test_acc": float(result.final.test_acc)}  # fmt: skip


def main(cases_path: str, results_path: str) -> None:
    with open(cases_path) as fh:
        cases = json.load(fh)
    handle = None
    dask = [c for c in cases if c["backend"] == "dask"]
    if dask:
        try:
            from adass.runtime.cluster import connect
        except ImportError:  # the layout before the runtime package
            from adass.cluster import connect

        handle = connect(n_workers=max(int(c["world"]) + int(c.get("servers", 0)) for c in dask))
    results = []
    try:
        for case in cases:
            try:
                results.append(one(case, handle))
            except Exception as err:  # noqa: BLE001 - a case this revision refuses is a row, not a stop
                results.append({"id": case["id"], "error": f"{type(err).__name__}: {err}"})
            print(f"{len(results)}/{len(cases)} {case['id']}", file=sys.stderr, flush=True)
    finally:
        if handle is not None:
            handle.close()
    with open(results_path, "w") as fh:
        json.dump(results, fh)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
