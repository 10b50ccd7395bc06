"""The testbed: the client and server hosts (network namespaces), the emulated link
between them (the ``longlook-link`` process), and the endpoints started inside them,
locally (``topology``), in Docker containers (``docker_backend``, ``containers``) or
as a user's own command (``commands``). Everything it starts is cleaned up, also what
a killed earlier run left behind. It knows the stacks (harness.endpoints) and the
schedules (harness.schedule); it never observes or judges a run."""
