"""The `ackorder` command line: argument parsing and console output over typed library
functions of spec/, tla/, reference/, stateful_tests/ and spark_fuzz/ (which never import it)."""
