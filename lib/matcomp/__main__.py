from matcomp.main import main

main()
