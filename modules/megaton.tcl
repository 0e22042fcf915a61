#%Module1.0
## megaton @VERSION@ (Tcl: environment-modules, or Lmod). Installed by modules/install-modulefiles.sh as
## PREFIX/modules/megaton/@VERSION@:
##   module use @PREFIX@/modules
##   module load megaton
proc ModulesHelp { } {
  puts stderr "megaton @VERSION@: GPT pretraining with tensor, pipeline and data parallelism"
  puts stderr "(Megatron-DeepSpeed's capabilities as one C++/MPI binary)."
  puts stderr ""
  puts stderr "  megaton --help                       the subcommands"
  puts stderr "  megaton train --dry-run ...          layout, memory per GPU and FLOPs of a configuration"
  puts stderr "  \$MEGATON_SLURM_TEMPLATES             ready SLURM job scripts"
  puts stderr "  \$MEGATON_DOC                         documentation (slurm.md, install.md, ...)"
}
module-whatis "Name: megaton"
module-whatis "Version: @VERSION@"
module-whatis "Description: GPT pretraining with tensor/pipeline/data parallelism, SLURM-native"

conflict megaton
set prefix {@PREFIX@}
prepend-path PATH $prefix/bin
setenv MEGATON_HOME $prefix
setenv MEGATON_SLURM_TEMPLATES $prefix/share/megaton/slurm
setenv MEGATON_DOC $prefix/share/doc/megaton
