package tuner

// For the tests.
var (
	SizeClass  = sizeClass
	ClassBytes = classBytes
)
