"""`toolhost serve --http` driven by the official MCP Python SDK over
Streamable HTTP, with the built-in bash plugin and the conformance plugin
(`target/examples/conformance/conformance.wasm`, built by
`plugins/examples/build.sh`).

Run by `cargo test` (tests/all/mcp.rs, `python_sdk_client`) with
TOOLHOST_BIN set to the built binary; by hand:
    TOOLHOST_BIN=target/debug/toolhost .venv/bin/python -m pytest tests/python
"""

import asyncio
import os
import signal
import subprocess
import tempfile

from mcp import ClientSession, types
from mcp.client.streamable_http import streamable_http_client

TOOLHOST = os.environ.get("TOOLHOST_BIN", "target/debug/toolhost")
ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
PLUGIN = os.path.join(ROOT, "target", "examples", "conformance", "conformance.wasm")


def _serve_http(ws, state):
    """Starts `toolhost serve --http 127.0.0.1:0` (allow-all policy, the
    conformance plugin) and returns (process, url) once it printed its URL."""
    assert os.path.isfile(PLUGIN), f"{PLUGIN} missing: run plugins/examples/build.sh"
    policy = os.path.join(state, "allow-all.toml")
    with open(policy, "w") as f:
        f.write('default = "allow"\n')
    proc = subprocess.Popen(
        [TOOLHOST, "serve", "--http", "127.0.0.1:0", "--plugin", PLUGIN,
         "--workspace", ws, "--state-dir", state, "--policy", policy],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True,
    )
    for line in proc.stderr:
        if "http://" in line:
            url = line[line.index("http://"):].split()[0]
            return proc, url
    raise AssertionError(f"toolhost serve --http exited with {proc.wait()} without a URL")


async def _with_session(body, **callbacks):
    with tempfile.TemporaryDirectory() as ws, tempfile.TemporaryDirectory() as state:
        proc, url = _serve_http(ws, state)
        try:
            async with streamable_http_client(url) as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write, **callbacks) as session:
                    await session.initialize()
                    return await body(session)
        finally:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=30) == 0


def test_tools_over_http():
    async def body(session):
        names = {t.name for t in (await session.list_tools()).tools}
        assert {"bash", "test_simple_text", "test_image_content"} <= names

        ok = await session.call_tool("bash", {"command": "printf 'over %s' http"})
        assert not ok.is_error
        assert ok.content[0].text.startswith("over http")

        text = await session.call_tool("test_simple_text", {})
        assert text.content[0].text == "This is a simple text response for testing."

        image = await session.call_tool("test_image_content", {})
        assert image.content[0].type == "image"
        assert image.content[0].mime_type == "image/png"

        error = await session.call_tool("test_error_handling", {})
        assert error.is_error

    asyncio.run(_with_session(body))


def test_logging_and_sampling_reach_the_client():
    logs = []

    async def logging_callback(params):
        logs.append(params.data)

    async def sampling_callback(context, params):
        prompt = params.messages[0].content.text
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text=f"echo: {prompt}"),
            model="test-model",
        )

    async def body(session):
        await session.set_logging_level("info")
        await session.call_tool("test_tool_with_logging", {})
        sampled = await session.call_tool("test_sampling", {"prompt": "hi there"})
        return sampled

    sampled = asyncio.run(_with_session(
        body, logging_callback=logging_callback, sampling_callback=sampling_callback))
    assert logs[:3] == ["Tool execution started", "Tool processing data",
                        "Tool execution completed"], logs
    assert not sampled.is_error
    assert sampled.content[0].text == "LLM response: echo: hi there"


def test_resources_and_prompts_over_http():
    async def body(session):
        uris = {str(r.uri) for r in (await session.list_resources()).resources}
        assert "test://static-text" in uris
        read = await session.read_resource("test://template/123/data")
        assert '"id":"123"' in read.contents[0].text
        prompt = await session.get_prompt(
            "test_prompt_with_arguments", {"arg1": "hello", "arg2": "world"})
        assert prompt.messages[0].content.text == \
            "Prompt with arguments: arg1='hello', arg2='world'"

    asyncio.run(_with_session(body))
