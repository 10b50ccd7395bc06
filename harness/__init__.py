"""longlook's harness, one room per concern, data flowing one way
(docs/architecture.md): schedule → testbed / virtual → run → observe → verdict →
report, with the RFCs' constants (``rfc``) below them all. ``cli`` and
``pytest_plugin`` are the two entry points on top."""
