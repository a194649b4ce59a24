"""NATS JetStream: nats-server on every node (db.py), nats-py clients on one
replicated stream (client.py), its claims (claims.py)."""
