"""The brokers queuecheck drives, by name: the one place the run layer (test,
matrix, demo, the perf tool, the CLI) learns which systems exist. Adding a
broker is its folder under workloads/ plus one line here."""

from __future__ import annotations

from .kafka.system import KafkaSystem
from .nats.system import NatsSystem
from .rabbitmq.system import RabbitMQSystem
from .system import System

SYSTEMS: dict[str, type[System]] = {
    "rabbitmq": RabbitMQSystem,
    "kafka": KafkaSystem,
    "nats": NatsSystem,
}
