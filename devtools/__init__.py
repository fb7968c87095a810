"""Tools that start the service rather than make it: `make run`'s supervisor and its port
check (ports: standard library only, run before the virtualenv exists), and the database
creation `make migrate` runs first (the image's `migrate` role runs it too)."""
