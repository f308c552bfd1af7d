"""The workers of one resource shape: their actors, what each holds in flight, whether
each is up (readiness probes polled without blocking), and which resources no node has."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

RAY_KEYS = {"num_cpus": "CPU", "num_gpus": "GPU", "memory": "memory"}

RAY_MAX_AMOUNT = (2**63 - 1) // 10_000
"""The largest resource amount Ray holds: it keeps one as a signed 64-bit count of
ten-thousandths (its ``RESOURCE_UNIT_SCALING``), unchecked. A larger one (10**15 bytes
of ``memory``, say) wraps round to a negative demand that every node meets, so a tool
asking for more than any node can have would run anywhere. No node can offer more than
this either, so asking for this instead asks for the same: more than any node has."""


def ray_amount(key: str, amount: Any) -> int | float:
    """`amount` of resource `key` as Ray is asked for it: past `RAY_MAX_AMOUNT` (infinity
    too), that. What is not a number of 0 or more (NaN, a negative number, text, True) is
    a `ValueError` that says so: Ray's own would say neither which resource nor why."""
    if isinstance(amount, bool) or not isinstance(amount, int | float) or not amount >= 0:
        raise ValueError(
            f"it asks Ray for {amount!r} of resource {key!r}: an amount must be a number "
            "of 0 or more"
        )
    return RAY_MAX_AMOUNT if amount > RAY_MAX_AMOUNT else amount


@dataclass(slots=True, eq=False)
class Pool:
    """The actors that run the calls of one resource shape: what each holds in flight, the
    process id of each actor's incarnation, and a readiness probe for each actor
    (re)starting. Probes are Ray object refs polled without blocking: the pool outlives
    any one event loop."""

    actors: list[Any]
    needs: Mapping[str, Any]
    load: list[int] = field(init=False)
    pids: list[int | None] = field(init=False)
    probes: dict[int, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.load = [0] * len(self.actors)
        self.pids = [None] * len(self.actors)
        self.probes = {index: actor.ready.remote() for index, actor in enumerate(self.actors)}

    def up(self) -> list[int]:
        """The actors that answer now."""
        if self.probes:
            self._poll()
        return [index for index in range(len(self.actors)) if index not in self.probes]

    def restarted(self, index: int) -> None:
        """The actor at `index` died or was killed: use it again once a new process answers."""
        if index not in self.probes:
            self.probes[index] = self.actors[index].ready.remote()

    def _poll(self) -> None:
        import ray
        import ray.exceptions

        for index, probe in list(self.probes.items()):
            ready, _ = ray.wait([probe], timeout=0)
            if not ready:
                continue
            try:
                pid = ray.get(probe)
            except (ray.exceptions.RayActorError, ray.exceptions.ActorUnavailableError):
                pid = None
            if pid is not None and pid != self.pids[index]:
                self.pids[index] = pid
                del self.probes[index]
            else:  # the old incarnation answered, or none yet: ask again
                self.probes[index] = self.actors[index].ready.remote()

    def missing(self) -> list[str]:
        """The resources this pool needs that no live node of the cluster has enough of."""
        import ray

        needs = {RAY_KEYS.get(key, key): amount for key, amount in self.needs.items()}
        alive = ray.nodes()  # type: ignore[no-untyped-call]
        nodes = [node.get("Resources", {}) for node in alive if node.get("Alive")]
        return [key for key, amount in needs.items() if all(n.get(key, 0) < amount for n in nodes)]
