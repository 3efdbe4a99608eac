// Package mcp is the example of an agent whose tools are MCP servers,
// fronted by the gateway's MCP endpoint ($OVERNIGHT_MCP_URL):
// scenario.yaml declares tickets.py (a stdio server in Python's standard
// library, its state a JSON file) and ./notes (a stdio server written with
// the official Go SDK) under mcp:, ./agent opens tickets with the Go SDK's
// client, and client.py does the same with Python's standard library
// only. See docs/mcp.md.
//
// The harness's own specs run this scenario against tickets.py in a real
// sandbox (harness/mcp_e2e_test.go); this file only documents it.
package mcp
