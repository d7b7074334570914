"""Shell completion: `nemori --install-completion` / `--show-completion`, and completion itself (typer's)."""

from __future__ import annotations

from typer.testing import CliRunner

from nemori_cli.cli.app import app


def test_help_offers_completion():
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "--install-completion" in result.stdout and "--show-completion" in result.stdout


def complete(words: str) -> list[str]:
    """What bash completion offers for the last word of ``words``, as the installed script asks for it."""
    parts = words.split(" ")
    env = {"_NEMORI_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(len(parts) - 1)}
    result = CliRunner().invoke(app, [], env=env, prog_name="nemori")
    assert result.exit_code == 0, result.output
    return result.stdout.split()


def test_commands_subcommands_and_choices_complete():
    assert complete("nemori ins") == ["inspect"]
    assert {"episodes", "facts", "notes"} <= set(complete("nemori inspect "))
    assert complete("nemori ingest x --memory nemori") == ["nemori+amem"]


def test_show_completion_prints_a_script_for_each_shell(monkeypatch):
    import typer.completion

    for shell, marker in (("bash", "complete -o default -F"), ("zsh", "compdef"), ("fish", "complete --command nemori")):
        monkeypatch.setattr(typer.completion, "_get_shell_name", lambda shell=shell: shell)  # as detected from the parent process
        result = CliRunner().invoke(app, ["--show-completion"], prog_name="nemori")
        assert result.exit_code == 0, result.output
        assert "_NEMORI_COMPLETE" in result.stdout and marker in result.stdout, shell
