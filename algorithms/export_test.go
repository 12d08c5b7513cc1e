package algorithms

// FlatFor is flatFor, for the external tests: the flat algorithm a
// hierarchical algorithm runs where there is nothing to compose.
var FlatFor = flatFor
