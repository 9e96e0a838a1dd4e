"""DepGraph -> Dockerfile (templates/Dockerfile.j2)."""

from bot.compile.dockerfile import CompiledDockerfile, DockerLine, compile_dockerfile

__all__ = ["CompiledDockerfile", "DockerLine", "compile_dockerfile"]
