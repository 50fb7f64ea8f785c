"""What a parameter-server shard owns under ``ps:update=server``: its slice of the parameters and of
the SGD state, stepped on the mean gradient with the replicas' optimizer settings and schedule.
"""

from __future__ import annotations

from typing import Any

import torch

from ..config import RunConfig
from ..exchange import ChunkLayout, Exchange, server_of
from ..models import build_model
from .step import flat_params, make_sgd, set_lr

__all__ = ["ShardOptimizer", "own_shard"]


class ShardOptimizer:
    """One server shard's parameters ``(hi - lo,)`` and SGD state (momentum buffer, weight decay).

    Parameters
    ----------
    params : Tensor
        The shard's initial parameters, a slice of every parameter flattened in model order.
    config : RunConfig
        The run: learning rate and schedule, momentum and weight decay, as a replica's optimizer has.

    Notes
    -----
    SGD works elementwise, so stepping a slice of the flat parameters gives, value for value, what a
    replica's optimizer gives stepping the whole model on the same mean gradient.
    """

    def __init__(self, params: torch.Tensor, config: RunConfig) -> None:
        self.config = config
        self.params = params.detach().to(torch.float32).clone()  # on ``params``' device
        self.optimizer = make_sgd([self.params], config)

    @classmethod
    def for_shard(
        cls, config: RunConfig, shape: tuple[int, ...], classes: int, shard: int, servers: int,
        device: torch.device | str = "cpu",
    ) -> ShardOptimizer:  # fmt: skip
        """Shard ``shard`` of ``servers`` of the initial model on ``device``: built from the run seed,
        as every replica builds it, so nothing needs to be sent before the first step."""
        flat = flat_params(build_model(config.model.model, shape, classes, seed=config.optim.seed))
        lo, hi = ChunkLayout(flat.numel(), servers).chunks[shard]
        return cls(flat[lo:hi].to(device), config)

    @torch.no_grad()
    def __call__(self, mean: torch.Tensor | None, epoch: int, share: float = 1.0) -> torch.Tensor:
        """One optimizer step on ``mean`` (None: a step without samples, no step) at ``share`` of
        ``epoch``'s learning rate (an asynchronous server steps once per push, each push at its
        share of the global batch); returns a copy of the parameters, which workers pull."""
        if mean is not None:
            set_lr(self.optimizer, self.config, epoch)
            if share != 1.0:
                for group in self.optimizer.param_groups:
                    group["lr"] *= share
            self.params.grad = mean
            self.optimizer.step()
            self.params.grad = None
        return self.params.clone()

    def state_dict(self) -> dict[str, Any]:
        """The parameters and the optimizer's state (loaded back onto either device)."""
        return {"params": self.params.detach().cpu().clone(), "optimizer": self.optimizer.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state["params"].shape != self.params.shape:
            raise ValueError(f"a saved shard of {tuple(state['params'].shape)} values does not fit this "
                             f"shard of {tuple(self.params.shape)}")  # fmt: skip
        self.params.copy_(state["params"])
        self.optimizer.load_state_dict(state["optimizer"])


def own_shard(exchange: Exchange, config: RunConfig, shape: tuple[int, ...], classes: int) -> None:
    """Give ``exchange`` the parameters and optimizer state of the server shard its rank serves,
    where the servers own them (``ps:update=server``): a dedicated server rank, or a worker that
    serves a shard beside its replica (``colocated=true``). Other ranks are left as they are."""
    server = server_of(exchange)
    held = None if server is None else server.held_shard()
    if server is not None and held is not None and server.pulls_parameters:
        server.own(ShardOptimizer.for_shard(config, shape, classes, *held, device=exchange.device))
