"""The one exception the harness raises: its message says what is missing and what to do."""


class HarnessError(RuntimeError):
    pass
