"""Where the nodes come from: the local namespace cluster (default) or a
cluster file listing machines the user already has. After this, one code
path: a NodeSpec per node, reached with harness.nodes.remote.Remote."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from ..names import bad_name
from .existing import NODE_FIELDS, Existing, ExistingError, parse_existing
from .remote import NodeSpec


class ClusterFileError(ValueError):
    """A cluster file that cannot be used; names the file, node and field."""


def _read(p: Path) -> tuple[dict, list]:
    try:
        text = p.read_text()
    except OSError as e:
        raise ClusterFileError(f"{p}: cannot read ({e.strerror})") from None
    try:
        doc = tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as e:
        raise ClusterFileError(f"{p}: not valid {p.suffix.lstrip('.') or 'JSON'} ({e})") from None
    rows = doc.get("nodes") if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not rows:
        raise ClusterFileError(f"{p}: expected a non-empty list under 'nodes'")
    unknown = set(doc) - {"nodes", "existing"}
    if unknown:
        raise ClusterFileError(f"{p}: unknown section {sorted(unknown)[0]!r}")
    return doc, rows


def load_existing(path: str | Path) -> Existing | None:
    """The cluster file's `[existing]` section (harness/nodes/existing.py), or
    None when the tool runs the brokers itself."""
    p = Path(path)
    load_cluster_file(p)  # the nodes first: their errors name them
    doc, rows = _read(p)
    if "existing" not in doc:
        return None
    try:
        return parse_existing(str(p), doc["existing"], rows)
    except ExistingError as e:
        raise ClusterFileError(str(e)) from None


def load_cluster_file(path: str | Path, known_hosts: str | None = None) -> list[NodeSpec]:
    """JSON or TOML: {"nodes": [{"name", "host", "port"?, "user"?, "key"?}, ...]},
    and for a cluster someone else runs an `existing` section (existing.py)."""
    p = Path(path)
    doc, rows = _read(p)
    fields = {"name", "host", "port", "user", "key"} | (NODE_FIELDS if "existing" in doc else set())
    specs, seen = [], set()
    for i, row in enumerate(rows):
        where = f"{p}: nodes[{i}]"
        if not isinstance(row, dict):
            raise ClusterFileError(f"{where}: expected a table/object")
        unknown = set(row) - fields
        if unknown:
            raise ClusterFileError(f"{where}: unknown field {sorted(unknown)[0]!r}")
        for k in ("name", "host", "user"):
            if k == "user" and k not in row:
                continue
            if not isinstance(row.get(k), str) or not row[k]:
                raise ClusterFileError(f"{where}: field {k!r} must be a non-empty string")
            why = bad_name(k, row[k])
            if why:
                raise ClusterFileError(f"{where}: field {k!r}: {why}")
        if row["name"] in seen:
            raise ClusterFileError(f"{where}: node name {row['name']!r} appears twice")
        seen.add(row["name"])
        port = row.get("port", 22)
        if not isinstance(port, int) or not 0 < port < 65536:
            raise ClusterFileError(f"{where}: field 'port' must be an int in 1..65535")
        key = row.get("key")
        if key is not None and not Path(key).expanduser().is_file():
            raise ClusterFileError(f"{where}: key file {key!r} does not exist")
        specs.append(
            NodeSpec(
                name=row["name"],
                host=row["host"],
                port=port,
                user=row.get("user", "root"),
                key=str(Path(key).expanduser()) if key else None,
                known_hosts=known_hosts,
            )
        )
    return specs
