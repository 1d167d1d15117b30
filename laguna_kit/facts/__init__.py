"""Facts pyinfra lacks, by domain (each module shares its name with an operations module).

Each fact runs one cheap, side-effect-free command: facts are not cached, and `--dry` runs them.
"""
