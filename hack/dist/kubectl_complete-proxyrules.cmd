@echo off
rem kubectl_complete-proxyrules.cmd: completion of "kubectl proxyrules ..." on Windows.
rem kubectl (1.26 and later) runs kubectl_complete-<plugin> from PATH to complete
rem a plugin's arguments; this asks the plugin itself through __complete.
if exist "%~dp0kubectl-proxyrules.exe" (
  "%~dp0kubectl-proxyrules.exe" __complete %*
) else (
  kubectl-proxyrules.exe __complete %*
)
