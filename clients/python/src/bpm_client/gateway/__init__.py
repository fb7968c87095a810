"""`bpm gateway`: an approval gateway in front of any MCP server (needs the `mcp` extra).

config.py reads the TOML rules, rules.py decides which rule a call falls under,
decisions.py builds the breakpoint and the results, waiting.py waits for many breakpoints
over one long-poll, passthrough.py forwards resources and prompts, server.py is the proxy.
"""
