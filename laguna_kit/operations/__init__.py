"""Operations pyinfra lacks, by domain, written like its own: read facts, yield only what is needed,
else ``host.noop(...)``. Each module shares its name with a facts module where it has facts."""
