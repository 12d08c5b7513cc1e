package mpi

// RunLocalOnHosts is runLocal, for the tests: RunLocal with rank r on
// host hosts[r].
var RunLocalOnHosts = runLocal
