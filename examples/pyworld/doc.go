// Package pyworld is an example world written in Python with the standard
// library only — inventory.py, an inventory of warehouse items and
// reservations served over the world protocol (overnight-world/1) — with
// the scenario that runs an agent against it (scenario.yaml) and that
// agent, in Go (./agent). A user copies inventory.py and adapts it; see
// README.md.
//
// Its Go code is all in its tests (which start inventory.py as a real
// process) and in ./agent; this file only documents it.
package pyworld
