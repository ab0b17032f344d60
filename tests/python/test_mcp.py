"""`toolhost serve` driven by the official MCP Python SDK (`mcp` on PyPI).

Run by `cargo test` (tests/all/mcp.rs, `python_sdk_client`) with
TOOLHOST_BIN set to the built binary; by hand:
    TOOLHOST_BIN=target/debug/toolhost .venv/bin/python -m pytest tests/python
"""

import asyncio
import os
import tempfile

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

TOOLHOST = os.environ.get("TOOLHOST_BIN", "target/debug/toolhost")


async def _with_session(body):
    with tempfile.TemporaryDirectory() as ws, tempfile.TemporaryDirectory() as state:
        # These tests are about the protocol: allow every command.
        policy = os.path.join(state, "allow-all.toml")
        with open(policy, "w") as f:
            f.write('default = "allow"\n')
        params = StdioServerParameters(
            command=TOOLHOST,
            args=["serve", "--workspace", ws, "--state-dir", state, "--policy", policy],
        )
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await body(session)


def test_list_and_call_tools():
    async def body(session):
        tools = await session.list_tools()
        by_name = {t.name: t for t in tools.tools}
        assert "bash" in by_name
        bash = by_name["bash"]
        assert "command" in bash.input_schema["properties"]
        assert bash.annotations.destructive_hint is True

        ok = await session.call_tool("bash", {"command": "echo hello from python"})
        assert not ok.is_error
        assert "hello from python" in ok.content[0].text
        assert ok.structured_content["exit_code"] == 0

        bad = await session.call_tool("bash", {"command": "echo before; exit 3"})
        assert bad.is_error
        assert "exit code 3" in bad.content[0].text

    asyncio.run(_with_session(body))


def test_progress_reaches_the_callback():
    seen = []

    async def progress(progress, total, message):
        seen.append(progress)

    async def body(session):
        result = await session.call_tool(
            "bash",
            {"command": "for i in 1 2 3 4; do echo line $i; sleep 0.2; done"},
            progress_callback=progress,
        )
        assert not result.is_error
        assert seen, "no progress notification arrived"
        assert seen == sorted(seen)

    asyncio.run(_with_session(body))
