"""The components a run can assemble onto a broker's lifecycle, by the
broker option that turns each on (a flag of every broker that offers it:
--lazyfs, --faketime): adding one is its file in this folder plus one line
here. Assembled in this order, released in reverse."""

from __future__ import annotations

from typing import Any

from harness.options import OptionError

from .assembly import Assembly, Component
from .faketime import Faketime
from .lazyfs import Lazyfs

COMPONENTS: dict[str, type[Component]] = {
    "lazyfs": Lazyfs,  # the data directory on lazyfs: power loss, full disks, stalled fsyncs
    "faketime": Faketime,  # a wall clock of the broker's own, which the clock fault sets
}


def assemble(lifecycle: type, options: Any) -> Assembly:
    """`lifecycle` with the components whose option is on in `options` (the
    broker's typed options), in registry order; OptionError naming the
    option when the lifecycle lacks what one needs."""
    chosen = []
    for name, component in COMPONENTS.items():
        if not getattr(options, name, False):
            continue
        if not issubclass(lifecycle, component.needs):
            raise OptionError(
                f"--{name}: {getattr(lifecycle, 'name', lifecycle.__name__)}'s lifecycle lacks "
                f"what it needs ({component.needs.__name__})"
            )
        chosen.append(component)
    return Assembly(lifecycle, tuple(chosen))


def every_component(lifecycle: type) -> Assembly:
    """`lifecycle` with every component it can take: what a killed run may
    have had on its nodes (a lazyfs mount), to be undone (`leftover_db`)."""
    return Assembly(
        lifecycle, tuple(c for c in COMPONENTS.values() if issubclass(lifecycle, c.needs))
    )
