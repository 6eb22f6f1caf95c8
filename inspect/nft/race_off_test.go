//go:build !race

package nft

const raceEnabled = false
