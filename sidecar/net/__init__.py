"""Outbound connections that someone other than the user can steer, shared by HTTP tools
(tools/providers/http/guard.py) and OAuth sign-in (mcp_host/oauth_guard.py).

- addresses.py: which IP addresses are not public (loopback, private, metadata, ...), and why;
- lookup.py: the resolver type and the system resolver (tests inject their own);
- pinned.py: the httpx2 transport that connects only to the addresses a guard resolved and checked,
  never by a second lookup (so a DNS answer that changes between check and connect changes
  nothing). It loads httpx2: import it lazily.

Each guard keeps its own rules (an HTTP tool's allowedHosts, an OAuth flow's server); what they share
is the table and the pinning.
"""
