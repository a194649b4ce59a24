"""Everything about RabbitMQ: lifecycle (db.py), the pika queue client
(client.py), claims (claims.py), and its System (system.py)."""
