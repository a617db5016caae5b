"""A tools module for ``toolwire chat --tools tests.chat_tools`` in tests: the demo tools as ``TOOLS``."""

from toolwire.harness.demo_tools import DemoWorld

WORLD = DemoWorld()
TOOLS = WORLD.tools()
