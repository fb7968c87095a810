"""What the service runs on, adapted: PostgreSQL (postgres/, Django's backend; db/, the
hot writes' statements built once and sent together, and locks beside the pool), the broker
(broker and embedded_broker, kombu's transports; publishing, an outbox's rows to the
workers), the cache's rate-limit counters, outbound HTTP (net: the SSRF guard), logs, the
environment the settings read, the Celery processes' signals and the startup check.
Above the kernel (core), below the web plumbing and the apps; no HTTP serving here."""
