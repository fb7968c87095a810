"""SQL machinery under the ORM: statements built once per process (prepared), a write's
statements sent as one (together), and locks taken with the connection in hand (locking).
Django's PostgreSQL backend itself stays in infra.postgres, the ENGINE the settings name."""
