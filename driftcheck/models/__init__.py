"""The served model: the built-in models' recipes (:mod:`.builtin` names them; each recipe,
:mod:`.tiny_llama` and :mod:`.tiny_kimi`, is also the script the target's interpreter runs to
generate it) and the model a scan or a probe reads the host's classes for (:mod:`.configs`)."""
