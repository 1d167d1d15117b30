"""What pyinfra lacks for this kit: facts, operations, hub verification, gate clients, profiles."""
