"""A cluster someone else runs (`[existing]` in a cluster file): the brokers
are configured and running already, under the vendor's service manager.
queuecheck never reconfigures or wipes them; it reaches each broker's
process only through the commands given here (defaults: systemd's), and
its clients through each node's `client` address.

    [existing]
    system = "kafka"          # the broker that runs there
    service = "kafka"         # the systemd unit the default commands act on
    logs = ["/var/log/kafka"] # copied into the run after the test
    # start/stop/kill/pause/resume: any of them overrides systemd's default,
    # here or per node; "{service}" and "{node}" are filled in
    # RabbitMQ: user, password, vhost for its clients; ctl (its admin
    # command) to read its settings and membership. NATS: user and password,
    # or credentials_file (a .creds file on this machine); each node's name
    # is its server's server_name

    [[nodes]]
    name = "k1"
    host = "10.0.0.11"
    client = "10.0.0.11:9092"
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any

COMMANDS = ("start", "stop", "kill", "pause", "resume")
# What a systemd unit answers to: the signals go to the unit's main process.
SYSTEMD = {
    "start": "systemctl start {service}",
    "stop": "systemctl stop {service}",
    "kill": "systemctl kill --kill-whom=main --signal=SIGKILL {service}",
    "pause": "systemctl kill --kill-whom=main --signal=SIGSTOP {service}",
    "resume": "systemctl kill --kill-whom=main --signal=SIGCONT {service}",
}
CREDENTIALS = ("user", "password", "vhost", "credentials_file")  # the broker's clients'
SECTION_FIELDS = {"system", "service", "logs", "ctl", *CREDENTIALS, *COMMANDS}
NODE_FIELDS = {"client", "logs", "ctl", *COMMANDS}  # what a node row may add or override
ADDRESS = re.compile(r"[A-Za-z0-9_.:%-]+:\d{1,5}")


class ExistingError(ValueError):
    """An `[existing]` section that cannot be used; names the field and node."""


@dataclass
class ExistingNode:
    name: str
    client: str  # host:port the broker's clients connect to
    commands: dict[str, str]  # start, stop, kill, pause, resume: shell commands
    logs: list[str]  # files or directories copied into the run
    ctl: str | None  # the broker's admin command on the node; None: the broker's default

    @property
    def client_host(self) -> str:
        return self.client.rsplit(":", 1)[0]

    @property
    def client_port(self) -> int:
        return int(self.client.rsplit(":", 1)[1])


@dataclass
class Existing:
    system: str
    service: str | None
    nodes: dict[str, ExistingNode]
    # the broker's own client credentials, where it has them (RabbitMQ)
    credentials: dict[str, str] = field(default_factory=dict)

    def record(self) -> dict[str, Any]:
        """What test.json keeps: everything but secrets."""
        return {
            "system": self.system,
            "service": self.service,
            "credentials": {
                k: ("***" if k == "password" else v) for k, v in self.credentials.items()
            },
            "nodes": {
                n.name: {"client": n.client, "commands": n.commands, "logs": n.logs, "ctl": n.ctl}
                for n in self.nodes.values()
            },
        }


def _text(where: str, key: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ExistingError(f"{where}: field {key!r} must be a non-empty string")
    return value


def _logs(where: str, value: object) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ExistingError(f"{where}: field 'logs' must be a list of paths")
    return list(value)


def parse_existing(where: str, section: object, rows: list[dict]) -> Existing:
    """The `[existing]` section and the node rows' own fields (already
    checked for name and host by the cluster file's loader)."""
    if not isinstance(section, dict):
        raise ExistingError(f"{where}: [existing] must be a table/object")
    unknown = set(section) - SECTION_FIELDS
    if unknown:
        raise ExistingError(f"{where}: [existing]: unknown field {sorted(unknown)[0]!r}")
    w = f"{where}: [existing]"
    system = _text(w, "system", section.get("system"))
    service = section.get("service")
    if service is not None:
        _text(w, "service", service)
        if not re.fullmatch(r"[A-Za-z0-9@_.:-]+", service):
            raise ExistingError(f"{w}: field 'service' {service!r} is not a unit name")
    shared = {c: _text(w, c, section[c]) for c in (*COMMANDS, "ctl") if c in section}
    shared_logs = _logs(w, section["logs"]) if "logs" in section else []
    credentials = {k: _text(w, k, section[k]) for k in CREDENTIALS if k in section}
    nodes: dict[str, ExistingNode] = {}
    for i, row in enumerate(rows):
        wn = f"{where}: nodes[{i}]"
        client = _text(wn, "client", row.get("client"))
        if not ADDRESS.fullmatch(client) or not 0 < int(client.rsplit(":", 1)[1]) < 65536:
            raise ExistingError(f"{wn}: field 'client' {client!r} is not host:port")
        commands = {}
        for c in (*COMMANDS, "ctl"):
            text = _text(wn, c, row[c]) if c in row else shared.get(c)
            if text is None and c == "ctl":
                continue  # the broker's own default admin command
            if text is None:
                if service is None:
                    raise ExistingError(
                        f"{wn}: no {c!r} command, and no 'service' in [existing] to "
                        "default to systemd's"
                    )
                text = SYSTEMD[c]
            commands[c] = text.replace("{service}", shlex.quote(service or "")).replace(
                "{node}", shlex.quote(row["name"])
            )
        logs = _logs(wn, row["logs"]) if "logs" in row else shared_logs
        ctl = commands.pop("ctl", None)
        nodes[row["name"]] = ExistingNode(row["name"], client, commands, logs, ctl)
    return Existing(system, service, nodes, credentials)
