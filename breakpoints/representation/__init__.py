"""A breakpoint as it leaves the server: the contract's JSON (contract) and the decision
time it is expected to wait (expected_decision)."""
