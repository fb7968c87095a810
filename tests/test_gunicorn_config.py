"""gunicorn.conf.py as gunicorn itself reads it (the web role's settings)."""

from pathlib import Path

from gunicorn.app.base import Application
from gunicorn.config import Config

CONFIG_FILE = Path(__file__).resolve().parents[1] / "gunicorn.conf.py"


class ConfigFileOnly(Application):
    """gunicorn's own loader, fed the config file alone (no command line to parse)."""

    def __init__(self, path: Path):
        self.usage, self.prog, self.callable = None, None, None
        self.cfg = Config()
        self.load_config_from_file(str(path))

    def load(self):  # pragma: no cover - never serves
        raise NotImplementedError


def test_the_control_socket_is_off():
    """gunicorn would otherwise open a control socket under $HOME/.gunicorn, which the
    image's user cannot write: an ERROR at every start. Nothing here uses gunicornc."""
    config = ConfigFileOnly(CONFIG_FILE).cfg
    assert config.control_socket_disable is True
