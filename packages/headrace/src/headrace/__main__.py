from headrace.demo import main

main()
