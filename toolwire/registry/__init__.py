"""Tool declarations, the closed registry, validation, authorization and dispatch (see the registry issue)."""

__all__: list[str] = []
