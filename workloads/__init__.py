"""Brokers and what runs against them: the protocols (client.py, db.py,
system.py, sinks/), the claims engine (claims.py), one folder per broker
(kafka/, rabbitmq/), and the registry of brokers (registry.py)."""
