"""Safety guards: `workspace` keeps paths inside the workspace, `network` keeps requests
off internal addresses. Import the submodules directly; nothing heavy loads here."""
