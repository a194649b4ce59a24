"""Everything about Kafka: lifecycle (db.py, dist.py + kafka-pom.xml for the
jars), admin steps (admin.py), clients (client.py, txn.py), its own sink
(txn_sink.py), claims (claims.py), and its System (system.py)."""
