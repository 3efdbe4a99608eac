package suite

// WarmHolders exposes warmHolders to the package's specs.
var WarmHolders = warmHolders
