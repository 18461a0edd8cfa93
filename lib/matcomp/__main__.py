from matcomp.cli import main

main()
