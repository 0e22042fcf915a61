-- megaton @VERSION@ (Lmod). Installed by modules/install-modulefiles.sh as PREFIX/modules/megaton/@VERSION@.lua:
--   module use @PREFIX@/modules
--   module load megaton
help([[
megaton @VERSION@: GPT pretraining with tensor, pipeline and data parallelism (Megatron-DeepSpeed's
capabilities as one C++/MPI binary).

  megaton --help                       the subcommands
  megaton train --dry-run ...          layout, memory per GPU and FLOPs of a configuration
  $MEGATON_SLURM_TEMPLATES             ready SLURM job scripts (smoke, tr1-13B, gpt3_175B, tr11-176B-bloom)
  $MEGATON_DOC                         documentation (slurm.md, install.md, ...)
]])
whatis("Name: megaton")
whatis("Version: @VERSION@")
whatis("Description: GPT pretraining with tensor/pipeline/data parallelism, SLURM-native")

local prefix = "@PREFIX@"
prepend_path("PATH", pathJoin(prefix, "bin"))
setenv("MEGATON_HOME", prefix)
setenv("MEGATON_SLURM_TEMPLATES", pathJoin(prefix, "share/megaton/slurm"))
setenv("MEGATON_DOC", pathJoin(prefix, "share/doc/megaton"))
