// Package pgdb is the cluster backend (doc to come).
package pgdb
