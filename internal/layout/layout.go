// Package layout holds the floors of docs/layout.md as a table, and its
// test checks every import of the module's packages against them: a
// package imports only its own room (top-level folder) or a room on a lower
// floor, so nothing runs upward and no circle can form between rooms.
package layout

// Floors places each room: the longest prefix of a package's path (below
// the module) that is a key here is its room. A folder that is not placed
// fails the test, so a new room is given a floor when it is added.
var Floors = map[string]int{
	"internal": 0, // test helpers and the few leaf packages the engines share
	"chain":    1, // vocabulary and the families, their synthetic chains
	"monitor":  1,
	"staging":  2,
	"loader":   3,
	"export":   3,
	"archive":  4,
	"family":   5,
	"pipeline": 6,
	"bench":    7,
	"cmd":      7,
	"deploy":   8, // tests of the built binary and its surroundings
	"faults":   8,
	"scripts":  8,
}

// Room is the room of a package path below the module ("" for one that no
// key of Floors places).
func Room(pkg string) string {
	best := ""
	for r := range Floors {
		if (pkg == r || len(pkg) > len(r) && pkg[:len(r)] == r && pkg[len(r)] == '/') && len(r) > len(best) {
			best = r
		}
	}
	return best
}
