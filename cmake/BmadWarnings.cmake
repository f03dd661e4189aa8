# Warnings for our own targets only (third-party and generated code stay quiet).
function(bmad_target_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-missing-field-initializers>)
endfunction()
